"""Results: the row schema, the environment it records, and the CSV store rows go to."""
