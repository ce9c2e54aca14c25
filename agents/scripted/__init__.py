"""The scripted test policy: a litellm custom provider standing in for a model offline, with faults on purpose."""
