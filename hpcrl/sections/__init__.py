"""The config's data: the dataclasses of every section of a run's configuration.

:class:`~hpcrl.sections.schema.Config` and its sections (``env``, ``actor``, ``algo`` with
each built-in algorithm's own section, ``train``, ``replay``, ``rnd``, ``scheme``) are
plain, documented dataclasses that import nothing of hpcrl but
:mod:`hpcrl.field_docs`. They sit below every layer, so that the components, the scheme
and the roles can name the section they read in their annotations without depending on the
layer that fills them in: the loader and the checks, :mod:`hpcrl.config`, which sit above
the components and ask them (the algorithms' declared sections and defaults, the scheme's
topology, the envs' checks). Users import these names from :mod:`hpcrl.config`, which
re-exports them beside ``load_config`` and ``from_dict``.

Importing this package stays light (no torch, no gymnasium): every layer's annotations,
``hpcrl runs`` and ``hpcrl --help`` import it.
"""
