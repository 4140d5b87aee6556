"""HTTP routes, one small module per resource; each calls model functions of the db package."""
