"""Analysis: metric kinds, statistics, bases, embeddings and their cache, divergence, plots."""
