"""Document matching on redrive: the matching worker's reliability design
rebuilt (see README.md for which part implements which section)."""
