"""Model replies: the reply schema, reading replies (JSON, prose, echoes) and their quality."""
