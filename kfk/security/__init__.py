"""Security: listeners' security protocols, TLS contexts, SASL mechanisms, the Authorizer (ACLs) and client quotas.

The network layer authenticates a connection and records its KafkaPrincipal on it; handlers ask the authorizer
whether that principal may do what the request asks. Nothing here opens sockets itself.
"""
