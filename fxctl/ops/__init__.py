"""Operations per domain: generators of commands from desired state and facts."""
