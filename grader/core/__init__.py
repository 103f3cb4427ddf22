"""Data and pure rules: errors, the course and its settings, manifests, records, scoring, the quiz."""
