"""A plug-in module that cannot be imported (the refusal tests name it)."""
import hpcrl_no_such_dependency  # noqa: F401
