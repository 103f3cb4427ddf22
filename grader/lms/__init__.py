"""The link to the course's LMS: LTI 1.3 launches as sign-in, grades back (Assignment and Grade
Services), the roster from the LMS (Names and Role Provisioning Services), and Canvas's REST API where
LTI is not set up. Keys and secrets live in files the course names (course.toml's [lms] table), never in
the gradebook or the repository; what was sent, and when, is recorded in the gradebook."""
