/*
 * kerr.h: Kafka protocol error codes, written once as an X-macro table.
 *
 * The standard codes are the ones of Apache Kafka's protocol guide (numbers
 * and names as published there); 134-146 are the cluster-mirroring codes of
 * mirrord's admin protocol (doc/protocol.md).  Each row is
 *   X(code, NAME, retriable, "short message")
 * where retriable follows Kafka's classification (a client may retry the
 * same request unchanged and expect it to succeed later).
 */
#ifndef MIRRORD_KERR_H
#define MIRRORD_KERR_H

#include <stdint.h>

#define KERR_TABLE(X) \
	X(-1, UNKNOWN_SERVER_ERROR, 0, "The server experienced an unexpected error when processing the request.") \
	X(0, NONE, 0, "No error.") \
	X(1, OFFSET_OUT_OF_RANGE, 0, "The requested offset is not within the range of offsets maintained by the server.") \
	X(2, CORRUPT_MESSAGE, 1, "The message contents does not match the message CRC or the message is otherwise corrupt.") \
	X(3, UNKNOWN_TOPIC_OR_PARTITION, 1, "This server does not host this topic-partition.") \
	X(4, INVALID_FETCH_SIZE, 0, "The requested fetch size is invalid.") \
	X(5, LEADER_NOT_AVAILABLE, 1, "There is no leader for this topic-partition as we are in the middle of a leadership election.") \
	X(6, NOT_LEADER_OR_FOLLOWER, 1, "For requests intended only for the leader, this error indicates that the broker is not the current leader.") \
	X(7, REQUEST_TIMED_OUT, 1, "The request timed out.") \
	X(8, BROKER_NOT_AVAILABLE, 0, "The broker is not available.") \
	X(9, REPLICA_NOT_AVAILABLE, 1, "The replica is not available for the requested topic-partition.") \
	X(10, MESSAGE_TOO_LARGE, 0, "The request included a message larger than the max message size the server will accept.") \
	X(11, STALE_CONTROLLER_EPOCH, 0, "The controller moved to another broker.") \
	X(12, OFFSET_METADATA_TOO_LARGE, 0, "The metadata field of the offset request was too large.") \
	X(13, NETWORK_EXCEPTION, 1, "The server disconnected before a response was received.") \
	X(14, COORDINATOR_LOAD_IN_PROGRESS, 1, "The coordinator is loading and hence can't process requests.") \
	X(15, COORDINATOR_NOT_AVAILABLE, 1, "The coordinator is not available.") \
	X(16, NOT_COORDINATOR, 1, "This is not the correct coordinator.") \
	X(17, INVALID_TOPIC_EXCEPTION, 0, "The request attempted to perform an operation on an invalid topic.") \
	X(18, RECORD_LIST_TOO_LARGE, 0, "The request included message batch larger than the configured segment size on the server.") \
	X(19, NOT_ENOUGH_REPLICAS, 1, "Messages are rejected since there are fewer in-sync replicas than required.") \
	X(20, NOT_ENOUGH_REPLICAS_AFTER_APPEND, 1, "Messages are written to the log, but to fewer in-sync replicas than required.") \
	X(21, INVALID_REQUIRED_ACKS, 0, "Produce request specified an invalid value for required acks.") \
	X(22, ILLEGAL_GENERATION, 0, "Specified group generation id is not valid.") \
	X(23, INCONSISTENT_GROUP_PROTOCOL, 0, "The group member's supported protocols are incompatible with those of existing members.") \
	X(24, INVALID_GROUP_ID, 0, "The configured groupId is invalid.") \
	X(25, UNKNOWN_MEMBER_ID, 0, "The coordinator is not aware of this member.") \
	X(26, INVALID_SESSION_TIMEOUT, 0, "The session timeout is not within the range allowed by the broker.") \
	X(27, REBALANCE_IN_PROGRESS, 0, "The group is rebalancing, so a rejoin is needed.") \
	X(28, INVALID_COMMIT_OFFSET_SIZE, 0, "The committing offset data size is not valid.") \
	X(29, TOPIC_AUTHORIZATION_FAILED, 0, "Topic authorization failed.") \
	X(30, GROUP_AUTHORIZATION_FAILED, 0, "Group authorization failed.") \
	X(31, CLUSTER_AUTHORIZATION_FAILED, 0, "Cluster authorization failed.") \
	X(32, INVALID_TIMESTAMP, 0, "The timestamp of the message is out of acceptable range.") \
	X(33, UNSUPPORTED_SASL_MECHANISM, 0, "The broker does not support the requested SASL mechanism.") \
	X(34, ILLEGAL_SASL_STATE, 0, "Request is not valid given the current SASL state.") \
	X(35, UNSUPPORTED_VERSION, 0, "The version of API is not supported.") \
	X(36, TOPIC_ALREADY_EXISTS, 0, "Topic with this name already exists.") \
	X(37, INVALID_PARTITIONS, 0, "Number of partitions is below 1.") \
	X(38, INVALID_REPLICATION_FACTOR, 0, "Replication factor is below 1 or larger than the number of available brokers.") \
	X(39, INVALID_REPLICA_ASSIGNMENT, 0, "Replica assignment is invalid.") \
	X(40, INVALID_CONFIG, 0, "Configuration is invalid.") \
	X(41, NOT_CONTROLLER, 1, "This is not the correct controller for this cluster.") \
	X(42, INVALID_REQUEST, 0, "This most likely occurs because of a request being malformed by the client library or the message was sent to an incompatible broker.") \
	X(43, UNSUPPORTED_FOR_MESSAGE_FORMAT, 0, "The message format version on the broker does not support the request.") \
	X(44, POLICY_VIOLATION, 0, "Request parameters do not satisfy the configured policy.") \
	X(45, OUT_OF_ORDER_SEQUENCE_NUMBER, 0, "The broker received an out of order sequence number.") \
	X(46, DUPLICATE_SEQUENCE_NUMBER, 0, "The broker received a duplicate sequence number.") \
	X(47, INVALID_PRODUCER_EPOCH, 0, "Producer attempted to produce with an old epoch.") \
	X(48, INVALID_TXN_STATE, 0, "The producer attempted a transactional operation in an invalid state.") \
	X(49, INVALID_PRODUCER_ID_MAPPING, 0, "The producer attempted to use a producer id which is not currently assigned to its transactional id.") \
	X(50, INVALID_TRANSACTION_TIMEOUT, 0, "The transaction timeout is larger than the maximum value allowed by the broker.") \
	X(51, CONCURRENT_TRANSACTIONS, 1, "The producer attempted to update a transaction while another concurrent operation on the same transaction was ongoing.") \
	X(52, TRANSACTION_COORDINATOR_FENCED, 0, "Indicates that the transaction coordinator sending a WriteTxnMarker is no longer the current coordinator for a given producer.") \
	X(53, TRANSACTIONAL_ID_AUTHORIZATION_FAILED, 0, "Transactional Id authorization failed.") \
	X(54, SECURITY_DISABLED, 0, "Security features are disabled.") \
	X(55, OPERATION_NOT_ATTEMPTED, 0, "The broker did not attempt to execute this operation.") \
	X(56, KAFKA_STORAGE_ERROR, 1, "Disk error when trying to access log file on the disk.") \
	X(57, LOG_DIR_NOT_FOUND, 0, "The user-specified log directory is not found in the broker config.") \
	X(58, SASL_AUTHENTICATION_FAILED, 0, "SASL Authentication failed.") \
	X(59, UNKNOWN_PRODUCER_ID, 0, "The broker could not locate the producer metadata associated with the producer id.") \
	X(60, REASSIGNMENT_IN_PROGRESS, 0, "A partition reassignment is in progress.") \
	X(61, DELEGATION_TOKEN_AUTH_DISABLED, 0, "Delegation Token feature is not enabled.") \
	X(62, DELEGATION_TOKEN_NOT_FOUND, 0, "Delegation Token is not found on server.") \
	X(63, DELEGATION_TOKEN_OWNER_MISMATCH, 0, "Specified Principal is not valid Owner/Renewer.") \
	X(64, DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, 0, "Delegation Token requests are not allowed on PLAINTEXT/1-way SSL channels and on delegation token authenticated channels.") \
	X(65, DELEGATION_TOKEN_AUTHORIZATION_FAILED, 0, "Delegation Token authorization failed.") \
	X(66, DELEGATION_TOKEN_EXPIRED, 0, "Delegation Token is expired.") \
	X(67, INVALID_PRINCIPAL_TYPE, 0, "Supplied principalType is not supported.") \
	X(68, NON_EMPTY_GROUP, 0, "The group is not empty.") \
	X(69, GROUP_ID_NOT_FOUND, 0, "The group id does not exist.") \
	X(70, FETCH_SESSION_ID_NOT_FOUND, 1, "The fetch session ID was not found.") \
	X(71, INVALID_FETCH_SESSION_EPOCH, 1, "The fetch session epoch is invalid.") \
	X(72, LISTENER_NOT_FOUND, 1, "There is no listener on the leader broker that matches the listener on which metadata request was processed.") \
	X(73, TOPIC_DELETION_DISABLED, 0, "Topic deletion is disabled.") \
	X(74, FENCED_LEADER_EPOCH, 1, "The leader epoch in the request is older than the epoch on the broker.") \
	X(75, UNKNOWN_LEADER_EPOCH, 1, "The leader epoch in the request is newer than the epoch on the broker.") \
	X(76, UNSUPPORTED_COMPRESSION_TYPE, 0, "The requesting client does not support the compression type of given partition.") \
	X(77, STALE_BROKER_EPOCH, 0, "Broker epoch has changed.") \
	X(78, OFFSET_NOT_AVAILABLE, 1, "The leader high watermark has not caught up from a recent leader election so the offsets cannot be guaranteed to be monotonically increasing.") \
	X(79, MEMBER_ID_REQUIRED, 0, "The group member needs to have a valid member id before actually entering a consumer group.") \
	X(80, PREFERRED_LEADER_NOT_AVAILABLE, 1, "The preferred leader was not available.") \
	X(81, GROUP_MAX_SIZE_REACHED, 0, "The consumer group has reached its max size.") \
	X(82, FENCED_INSTANCE_ID, 0, "The broker rejected this static consumer since another consumer with the same group.instance.id has registered with a different member.id.") \
	X(83, ELIGIBLE_LEADERS_NOT_AVAILABLE, 1, "Eligible topic partition leaders are not available.") \
	X(84, ELECTION_NOT_NEEDED, 1, "Leader election not needed for topic partition.") \
	X(85, NO_REASSIGNMENT_IN_PROGRESS, 0, "No partition reassignment is in progress.") \
	X(86, GROUP_SUBSCRIBED_TO_TOPIC, 0, "Deleting offsets of a topic is forbidden while the consumer group is actively subscribed to it.") \
	X(87, INVALID_RECORD, 0, "This record has failed the validation on broker and hence will be rejected.") \
	X(88, UNSTABLE_OFFSET_COMMIT, 1, "There are unstable offsets that need to be cleared.") \
	X(89, THROTTLING_QUOTA_EXCEEDED, 1, "The throttling quota has been exceeded.") \
	X(90, PRODUCER_FENCED, 0, "There is a newer producer with the same transactionalId which fences the current one.") \
	X(91, RESOURCE_NOT_FOUND, 0, "A request illegally referred to a resource that does not exist.") \
	X(92, DUPLICATE_RESOURCE, 0, "A request illegally referred to the same resource twice.") \
	X(93, UNACCEPTABLE_CREDENTIAL, 0, "Requested credential would not meet criteria for acceptability.") \
	X(94, INCONSISTENT_VOTER_SET, 0, "Indicates that the either the sender or recipient of a voter-only request is not one of the expected voters.") \
	X(95, INVALID_UPDATE_VERSION, 0, "The given update version was invalid.") \
	X(96, FEATURE_UPDATE_FAILED, 0, "Unable to update finalized features due to an unexpected server error.") \
	X(97, PRINCIPAL_DESERIALIZATION_FAILURE, 0, "Request principal deserialization failed during forwarding.") \
	X(98, SNAPSHOT_NOT_FOUND, 0, "Requested snapshot was not found.") \
	X(99, POSITION_OUT_OF_RANGE, 0, "Requested position is not greater than or equal to zero, and less than the size of the snapshot.") \
	X(100, UNKNOWN_TOPIC_ID, 1, "This server does not host this topic ID.") \
	X(101, DUPLICATE_BROKER_REGISTRATION, 0, "This broker ID is already in use.") \
	X(102, BROKER_ID_NOT_REGISTERED, 0, "The given broker ID was not registered.") \
	X(103, INCONSISTENT_TOPIC_ID, 1, "The log's topic ID did not match the topic ID in the request.") \
	X(104, INCONSISTENT_CLUSTER_ID, 0, "The clusterId in the request does not match that found on the server.") \
	X(105, TRANSACTIONAL_ID_NOT_FOUND, 0, "The transactionalId could not be found.") \
	X(106, FETCH_SESSION_TOPIC_ID_ERROR, 1, "The fetch session encountered inconsistent topic ID usage.") \
	X(107, INELIGIBLE_REPLICA, 0, "The new ISR contains at least one ineligible replica.") \
	X(108, NEW_LEADER_ELECTED, 0, "The AlterPartition request successfully updated the partition state but the leader has changed.") \
	X(109, OFFSET_MOVED_TO_TIERED_STORAGE, 0, "The requested offset is moved to tiered storage.") \
	X(110, FENCED_MEMBER_EPOCH, 0, "The member epoch is fenced by the group coordinator.") \
	X(111, UNRELEASED_INSTANCE_ID, 0, "The instance ID is still used by another member in the consumer group.") \
	X(112, UNSUPPORTED_ASSIGNOR, 0, "The assignor or its version range is not supported by the consumer group.") \
	X(113, STALE_MEMBER_EPOCH, 0, "The member epoch is stale.") \
	X(114, MISMATCHED_ENDPOINT_TYPE, 0, "The request was sent to an endpoint of the wrong type.") \
	X(115, UNSUPPORTED_ENDPOINT_TYPE, 0, "This endpoint type is not supported yet.") \
	X(116, UNKNOWN_CONTROLLER_ID, 0, "This controller ID is not known.") \
	X(117, UNKNOWN_SUBSCRIPTION_ID, 0, "Client sent a push telemetry request with an invalid or outdated subscription ID.") \
	X(118, TELEMETRY_TOO_LARGE, 0, "Client sent a push telemetry request larger than the maximum size the broker will accept.") \
	X(119, INVALID_REGISTRATION, 0, "The controller has considered the broker registration to be invalid.") \
	X(120, TRANSACTION_ABORTABLE, 0, "The server encountered an error with the transaction; the client can abort the transaction to continue.") \
	X(121, INVALID_RECORD_STATE, 0, "The record state is invalid.") \
	X(122, SHARE_SESSION_NOT_FOUND, 1, "The share session was not found.") \
	X(123, INVALID_SHARE_SESSION_EPOCH, 1, "The share session epoch is invalid.") \
	X(124, FENCED_STATE_EPOCH, 0, "The share coordinator rejected the request because the share-group state epoch did not match.") \
	X(125, INVALID_VOTER_KEY, 0, "The voter key doesn't match the receiving replica's key.") \
	X(126, DUPLICATE_VOTER, 0, "The voter is already part of the set of voters.") \
	X(127, VOTER_NOT_FOUND, 0, "The voter is not part of the set of voters.") \
	X(128, INVALID_REGULAR_EXPRESSION, 0, "The regular expression is not valid.") \
	X(129, REBOOTSTRAP_REQUIRED, 0, "Client metadata is stale; the client should rebootstrap to obtain new metadata.") \
	X(130, STREAMS_INVALID_TOPOLOGY, 0, "The supplied topology is invalid.") \
	X(131, STREAMS_INVALID_TOPOLOGY_EPOCH, 0, "The supplied topology epoch is invalid.") \
	X(132, STREAMS_TOPOLOGY_FENCED, 0, "The supplied topology epoch is outdated.") \
	X(133, SHARE_SESSION_LIMIT_REACHED, 1, "The limit of share sessions has been reached.") \
	X(134, READ_ONLY_TOPIC, 0, "The topic is a mirror topic and is read-only.") \
	X(135, INVALID_CLUSTER_MIRROR_NAME, 0, "The cluster mirror name is invalid.") \
	X(136, CLUSTER_MIRROR_ALREADY_EXISTS, 0, "A cluster mirror with this name already exists.") \
	X(137, UNKNOWN_CLUSTER_MIRROR, 0, "The cluster mirror does not exist.") \
	X(138, TOPIC_ALREADY_IN_CLUSTER_MIRROR, 0, "The topic is already held by another cluster mirror.") \
	X(139, TOPIC_NOT_IN_CLUSTER_MIRROR, 0, "The topic is not in this cluster mirror.") \
	X(140, MIRROR_TOPIC_ALREADY_PAUSED, 0, "The mirror topic is already paused.") \
	X(141, MIRROR_TOPIC_NOT_PAUSED, 0, "The mirror topic is not paused.") \
	X(142, MIRROR_TOPIC_BEING_STOPPED, 0, "The mirror topic is being stopped or is stopped.") \
	X(143, CLUSTER_MIRROR_NOT_EMPTY, 0, "The cluster mirror still has topics that are not stopped.") \
	X(144, CLUSTER_MIRROR_AUTHORIZATION_FAILED, 0, "Cluster mirror authorization failed.") \
	X(145, INVALID_CLUSTER_MIRROR_STATES, 1, "The mirror partition states changed while the request was processed.") \
	X(146, MIRROR_TOPIC_NOT_STOPPED, 0, "The mirror topic is not stopped.")

enum kerr {
#define X(code, name, retry, msg) KERR_##name = (code),
	KERR_TABLE(X)
#undef X
};

/* "NOT_LEADER_OR_FOLLOWER"; "UNKNOWN_CODE" for codes not in the table. */
const char *kerr_name(int16_t code);
/* The short human message; a generic one for codes not in the table. */
const char *kerr_message(int16_t code);
/* 1 if Kafka classifies the code as retriable. Unknown codes are not. */
int kerr_retriable(int16_t code);
/* 1 if the code is in the table. */
int kerr_known(int16_t code);
/* The code for a name (case-insensitive, "KERR_" prefix allowed), or -2. */
int16_t kerr_from_name(const char *name);

#endif
