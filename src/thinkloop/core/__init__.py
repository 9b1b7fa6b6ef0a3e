"""The vocabulary every part of thinkloop speaks; it imports nothing above it."""
