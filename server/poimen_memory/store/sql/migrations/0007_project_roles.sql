-- Row-level security per project: a role listed in role_project sees and writes only the
-- rows of its projects; a role not listed there sees everything, as before.
--
-- Rows are set by `mem db grant-readonly ROLE --project P` (store.access). A role is
-- restricted when it is listed, or when it has the privileges of a listed role (it is a member
-- that inherits them): then it sees the projects of all of them. A listed role that no longer
-- exists restricts no one.
--
-- RLS is ENABLEd, not FORCEd: the tables' owner (the role that migrates, ingests and serves)
-- and superusers bypass it and pay nothing. The predicates call the functions in scalar
-- subqueries, so Postgres evaluates them once per statement (an initplan), not once per row
-- (`::text[]` makes `ANY ((SELECT ...))` an array, not `ANY (subquery)`).
CREATE TABLE role_project (
    role     name NOT NULL,
    project  text NOT NULL CHECK (
        project ~ '^[A-Za-z0-9][A-Za-z0-9._:@/+=-]*$' AND length(project) <= 128
    ),
    PRIMARY KEY (role, project)
);

-- Every role may read its own restrictions (the functions below run as the caller and read
-- them); only the owner may change them: there is no policy for writes, so RLS refuses them
-- to everyone else whatever their grants.
ALTER TABLE role_project ENABLE ROW LEVEL SECURITY;
GRANT SELECT ON role_project TO PUBLIC;
CREATE POLICY role_project_own ON role_project FOR SELECT USING (
    pg_catalog.pg_has_role(
        current_user,
        (SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname = role_project.role),
        'USAGE'
    )
);

-- The functions run as the caller (current_user must be the caller's), with a fixed
-- search_path; they see only the caller's rows of role_project through its policy.
CREATE FUNCTION poimen_unrestricted() RETURNS boolean
    LANGUAGE sql STABLE PARALLEL SAFE SECURITY INVOKER
    SET search_path = pg_catalog, pg_temp
    AS $$ SELECT NOT EXISTS (SELECT 1 FROM public.role_project) $$;

CREATE FUNCTION poimen_role_projects() RETURNS text[]
    LANGUAGE sql STABLE PARALLEL SAFE SECURITY INVOKER
    SET search_path = pg_catalog, pg_temp
    AS $$ SELECT coalesce(array_agg(DISTINCT project), '{}') FROM public.role_project $$;

-- Every table with a `project` column. One policy for every command: USING for the rows a
-- role reads, updates and deletes, WITH CHECK for the rows it inserts or updates into.
ALTER TABLE memory_node ENABLE ROW LEVEL SECURITY;
CREATE POLICY memory_node_by_project ON memory_node
    USING ((SELECT poimen_unrestricted()) OR project = ANY ((SELECT poimen_role_projects())::text[]))
    WITH CHECK ((SELECT poimen_unrestricted()) OR project = ANY ((SELECT poimen_role_projects())::text[]));

ALTER TABLE memory_edge ENABLE ROW LEVEL SECURITY;
CREATE POLICY memory_edge_by_project ON memory_edge
    USING ((SELECT poimen_unrestricted()) OR project = ANY ((SELECT poimen_role_projects())::text[]))
    WITH CHECK ((SELECT poimen_unrestricted()) OR project = ANY ((SELECT poimen_role_projects())::text[]));

ALTER TABLE git_commit ENABLE ROW LEVEL SECURITY;
CREATE POLICY git_commit_by_project ON git_commit
    USING ((SELECT poimen_unrestricted()) OR project = ANY ((SELECT poimen_role_projects())::text[]))
    WITH CHECK ((SELECT poimen_unrestricted()) OR project = ANY ((SELECT poimen_role_projects())::text[]));

ALTER TABLE git_anchor ENABLE ROW LEVEL SECURITY;
CREATE POLICY git_anchor_by_project ON git_anchor
    USING ((SELECT poimen_unrestricted()) OR project = ANY ((SELECT poimen_role_projects())::text[]))
    WITH CHECK ((SELECT poimen_unrestricted()) OR project = ANY ((SELECT poimen_role_projects())::text[]));

ALTER TABLE commit_alias ENABLE ROW LEVEL SECURITY;
CREATE POLICY commit_alias_by_project ON commit_alias
    USING ((SELECT poimen_unrestricted()) OR project = ANY ((SELECT poimen_role_projects())::text[]))
    WITH CHECK ((SELECT poimen_unrestricted()) OR project = ANY ((SELECT poimen_role_projects())::text[]));

ALTER TABLE blame_file ENABLE ROW LEVEL SECURITY;
CREATE POLICY blame_file_by_project ON blame_file
    USING ((SELECT poimen_unrestricted()) OR project = ANY ((SELECT poimen_role_projects())::text[]))
    WITH CHECK ((SELECT poimen_unrestricted()) OR project = ANY ((SELECT poimen_role_projects())::text[]));

ALTER TABLE blame_run ENABLE ROW LEVEL SECURITY;
CREATE POLICY blame_run_by_project ON blame_run
    USING ((SELECT poimen_unrestricted()) OR project = ANY ((SELECT poimen_role_projects())::text[]))
    WITH CHECK ((SELECT poimen_unrestricted()) OR project = ANY ((SELECT poimen_role_projects())::text[]));

ALTER TABLE pending_anchor ENABLE ROW LEVEL SECURITY;
CREATE POLICY pending_anchor_by_project ON pending_anchor
    USING ((SELECT poimen_unrestricted()) OR project = ANY ((SELECT poimen_role_projects())::text[]))
    WITH CHECK ((SELECT poimen_unrestricted()) OR project = ANY ((SELECT poimen_role_projects())::text[]));
