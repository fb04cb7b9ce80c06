"""batchscale pipeline components: what each DAG step does."""
