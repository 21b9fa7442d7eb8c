"""The PDF→XML converter, rebuilt on redrive: an upload service, a worker
that calls a flaky conversion gateway behind a circuit breaker, and a queue
page. See README.md."""
