"""What `dlbench peak` measures, as results: its row's columns, the attained figures every
later run divides by, and a GPU's figures beside its datasheet and its siblings. They live in
results, not in peak/, because the engine (MFU against the attained peak), the schema and the
fleet report (analysis.fleet) read them, and those sit below peak/."""
