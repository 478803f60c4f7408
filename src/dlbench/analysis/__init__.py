"""Analysis: statistics over step times, comparisons, reports and power recommendations."""
