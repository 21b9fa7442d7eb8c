"""Review notifications on redrive: the review notification processing
spec, §6, §8 and §10 (see README.md for which part implements what)."""
