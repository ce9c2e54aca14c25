"""Results as people read them: Markdown tables, PNG plots and JSON files of simulations and of runs over seeds."""
