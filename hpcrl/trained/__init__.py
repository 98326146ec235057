"""A trained policy outside its run: the policy file a checkpoint holds, loading it,
and the frozen reference policies of the KL add-ons."""
