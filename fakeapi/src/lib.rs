//! fakeapi: a Kubernetes API over an in-memory versioned store.
