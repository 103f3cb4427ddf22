"""What leaves the course: the student release and the autograder bundle."""
