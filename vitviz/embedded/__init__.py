"""The embedded offline model: the generated shape scenes it learns from, its training and its measured quality."""
