"""thinkloop's vocabulary: the small types and protocols every layer shares."""
