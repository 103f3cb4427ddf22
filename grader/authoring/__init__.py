"""The instructor's authoring tools: what an assignment's files say, checked (consistency), graded
(validate), and a new assignment written (scaffold)."""
