"""Assignment 3 reference: solutions, mutants, hidden tests and quiz key (instructor only)."""
