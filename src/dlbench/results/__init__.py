"""Results: the row schema and the builder of a row, the environment a row records, what is
derived from a measurement (statistics, efficiency, a job's sums, the verdict, peak figures)
and the CSV store rows go to."""
