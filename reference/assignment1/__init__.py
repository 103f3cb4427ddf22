"""Instructor-only material of assignment 1: solution, misconceptions, quiz key, hidden tests."""
