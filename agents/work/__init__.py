"""The runtime on a real task in a folder (`skillstate work`): its tools, its reply, its loop."""
