"""Reference solution of assignment2: multi-head attention and positions (§15–§21)."""
