"""One module per caller (mem0, graphiti, memos, honcho, nanobot...), each exporting HANDLERS."""
