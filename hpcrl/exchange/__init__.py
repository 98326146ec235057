"""The exchanges between roles, apart from where the roles run: acting requests and replies
(:mod:`~hpcrl.exchange.acting_slots`) and weights delivery (:mod:`~hpcrl.exchange.weights`), each
with its in-process, shared-memory and message forms behind one interface."""
