"""Analysis of stored rows: comparisons and the CI gate, reports, scaling efficiency, the fleet
check and power recommendations."""
