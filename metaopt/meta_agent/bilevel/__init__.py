"""The bilevel strategy: Level 1.5 (search parameters), Level 2 (generated mechanisms), the mechanism host, the validation ladder and the judgement. Entry point: meta_agent.strategies.bilevel."""
