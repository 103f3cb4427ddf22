"""Reports, exports and figures from records: rendering only, nothing computed twice."""
