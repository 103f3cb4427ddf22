"""What hidden and public tests call: the check object, diagnosis, runners, the suite, timing."""
