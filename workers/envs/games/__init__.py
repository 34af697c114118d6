"""HTML5 mini-games (2048, whack-a-mole, maze) with JS verifiers, as the `game` environment kind."""
