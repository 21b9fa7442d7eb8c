"""Pure domain: no I/O, no clock reads. Time and randomness are passed in."""
