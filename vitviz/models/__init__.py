"""Models: hooks, loading, the Runner that owns a loaded model (every forward runs through it), the one cache of
loaded models, and what a request may cost."""
