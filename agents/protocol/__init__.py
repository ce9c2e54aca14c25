"""What a step is asked and must answer: the paper's prompts, the reply format, how transcript answers are read."""
