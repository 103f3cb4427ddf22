from grader.cli.process import run

run()
