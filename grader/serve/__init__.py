"""The course server (`grade serve`): students sign in with a link staff issue, upload their files, watch
their place in the queue and the status of their grading live, and read the report `grade submit` writes.

One web process (Starlette, server-rendered Jinja2 pages, uvicorn) over the course's gradebook, its only
writer: jobs are gradebook rows with a state, a lease, a heartbeat and an attempt count; the gradings run
on an executor of grader.pipeline (the local pool, or Ray) and come back as data, and the server records
each one with its job's end in one transaction.

Modules: auth (the signing key, sign-in links, sessions and CSRF tokens), uploads (an upload's bytes to a
Submission, within intake's limits), queue (the gradebook behind a lock: jobs, places, waits, rate
limits), runner (the thread that grants jobs to the executor, heartbeats and records), app (the pages).
"""
