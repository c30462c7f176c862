package io.walhook.checkpoint;

/**
 * The server history positions were read on: the cluster's system identifier and its timeline, as
 * {@code IDENTIFY_SYSTEM} reports them. A promoted standby keeps the system identifier and starts
 * a new timeline; a cluster made afresh (initdb, pg_upgrade) has another system identifier.
 *
 * @param systemId the system identifier, in decimal
 * @param id the timeline, 1 or more; 0 when unknown
 */
public record Timeline(String systemId, long id) {

    /** Positions whose history was not recorded (a checkpoint saved before walhook kept it). */
    public static final Timeline UNKNOWN = new Timeline(null, 0);

    public boolean known() {
        return id > 0 && systemId != null;
    }

    @Override
    public String toString() {
        return known() ? "timeline " + id + " of system " + systemId : "an unrecorded timeline";
    }
}
