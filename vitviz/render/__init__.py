"""Drawing: figures sized for a projector (matplotlib Figure objects, PIL), and what the browser views receive and run."""
