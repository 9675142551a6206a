"""What one forward is asked to record (probes run by :class:`vitviz.models.runner.Runner`): attention over every
layer, one layer taken apart, the token streams, class relevance, classification and its experiments."""
