"""English constituency parsing as sequence-to-sequence (§6.3): trees, linearisation, repair of decoded output."""
