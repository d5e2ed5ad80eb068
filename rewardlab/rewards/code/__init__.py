"""Code execution rewards: untrusted programs run against tests inside a sandbox."""
