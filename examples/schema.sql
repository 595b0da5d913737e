-- schema.sql -- the table examples/loader fills with examples/generator's
-- rating events.  The loader runs the same statements (kept in sync by hand,
-- see SCHEMA_SQL in examples/loader.c) before it inserts anything, so this
-- file is for reading and for psql; it is idempotent.
CREATE TABLE IF NOT EXISTS event (
	event_source     text        NOT NULL,
	event_ref        uuid        NOT NULL,
	event_type       smallint    NOT NULL,
	event_date       timestamptz NOT NULL,
	calling_number   text        NOT NULL,
	called_number    text        NOT NULL,
	location         text        NOT NULL,
	duration_seconds integer     NOT NULL,
	attr_1           text        NOT NULL,
	attr_2           text        NOT NULL,
	attr_3           text        NOT NULL,
	attr_4           text        NOT NULL,
	attr_5           text        NOT NULL,
	attr_6           text        NOT NULL,
	attr_7           text        NOT NULL,
	attr_8           text        NOT NULL,
	PRIMARY KEY (event_source, event_ref)
);
CREATE INDEX IF NOT EXISTS event_event_date_idx ON event (event_date);
CREATE INDEX IF NOT EXISTS event_event_type_idx ON event (event_type);
