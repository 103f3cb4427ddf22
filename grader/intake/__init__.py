"""A hand-in becomes a Submission and its static findings."""
