"""The gradebook (the only writer of storage) and the class roster."""
