"""A review criticizer on redrive: the criticizer's processing
specification, §8 (see README.md for which part implements what)."""
